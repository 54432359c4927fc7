"""Code the chapters export: one module per chapter, written by `make sync` from the cells
marked `#| export` (see booktools.maintain.notebooks). Nothing here is edited by hand; the rest of
booktools is infrastructure (notebook set-up, evidence helpers, data, engines)."""
