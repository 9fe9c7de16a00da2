"""Helpers the test folders share (test doubles, fixtures' builders, the docs' code blocks, the nested suites' runner):
imported as ``support.<module>``. Nothing here is collected as a test."""
