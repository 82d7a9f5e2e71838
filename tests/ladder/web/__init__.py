"""Tests of the dashboard (ladder/web/)."""
