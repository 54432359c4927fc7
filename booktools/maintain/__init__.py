"""The book's maintainer tools, which readers never call: notebooks (refresh, sync, export and
their CLI), notebook_rules (what `make check` enforces), website (the Sphinx extension and the
MathJax fetch behind `make book`), sql_answers (Part IV's expected answers, rewritten)."""
