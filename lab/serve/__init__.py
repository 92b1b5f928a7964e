"""``lab serve``: the reports folder as a web app a team works in (runs, comparisons, runs in
progress, an annotation queue with labels in SQLite). Reads run files only, as reports do."""
