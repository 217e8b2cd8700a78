// Starts the vendored Swagger UI on the page's OpenAPI document (app/views/ops.py).
window.addEventListener("load", function () {
  var el = document.getElementById("swagger-ui");
  // validatorUrl: null, or the page would ask validator.swagger.io (deployments may be offline)
  window.ui = SwaggerUIBundle({
    url: el.dataset.url, dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null,
  });
});
