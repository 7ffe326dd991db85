"""Thin handlers: parse -> authorize -> call domain -> serialize."""
