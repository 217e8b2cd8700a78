-- Which names a community's Home and Company streams carry (decisions.md): 'current' (Home,
-- Company) or 'classic' (Home Stream, Company Stream, as older real clients look them up).
ALTER TABLE communities ADD COLUMN stream_names text NOT NULL DEFAULT 'current'
    CHECK (stream_names IN ('current', 'classic'));
