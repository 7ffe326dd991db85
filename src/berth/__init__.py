"""Berth: a fast, drop-in implementation of the OpenStack Placement service."""

__version__ = "0.1.0"
