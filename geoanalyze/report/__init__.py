"""Results for people: terminal tables (render, stress), report pages (page) and PNG figures (figures).

A stress result's JSON and Markdown are its own (:mod:`geoanalyze.results`); this layer prints,
pages and draws it.
"""
