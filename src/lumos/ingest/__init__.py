"""Readers that turn raw trace files into typed, columnar traces (the only stage that parses JSON)."""
