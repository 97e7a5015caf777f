"""What claudex never shows in full: the one secret scrubber every text it shows, logs or
answers with passes (`secrets.py`), the allow-list that decides which of a client's header
values are shown and masks the rest (`header_policy.py`), and the log's redaction filter with
where the log goes — stderr for `claudex serve`, a file for the console (`logs.py`)."""
