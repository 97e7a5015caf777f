"""The history journal (SQLite): what a request's and an event's row holds (`rows.py`), the file
with its schema, migrations and per-minute sums (`database.py`), writing the rows (`journal.py`),
reading and searching them (`query.py`), `claudex usage`'s report (`usage_report.py`), and
seeding the counters at start (`seed.py`)."""
