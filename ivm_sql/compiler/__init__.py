"""Views -> plans: parse, qualify, build algebra, cut into stages, and render for `ivm compile`.

- ``order``: all views, in dependency order, with the plan cache;
- ``view``: one view, along the route its policy takes (``routing``);
- ``reads``, ``qualify``: what a view reads, its SELECT qualified, its output schema;
- ``plan``: the plan, its stage tables' DDL and fingerprints;
- ``render``: `ivm compile`'s text.
"""
