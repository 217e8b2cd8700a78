// Starts the vendored Swagger UI on the page's OpenAPI document (app/views/ops.py).
window.addEventListener("load", function () {
  var el = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({ url: el.dataset.url, dom_id: "#swagger-ui", deepLinking: true });
});
