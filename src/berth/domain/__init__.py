"""Domain rules and SQL. Nothing here knows about HTTP."""
