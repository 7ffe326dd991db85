"""Database layer: tables, engine set-up, transactions and migrations."""
