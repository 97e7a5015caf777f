"""The history journal (SQLite): writing request summaries and events (`journal.py`), reading
and searching them (`query.py`), and seeding the counters at start (`seed.py`)."""
