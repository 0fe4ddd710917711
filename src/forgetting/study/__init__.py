"""The study: its config loaded and checked once, its configurations and their names, its
run table (``forgetting plan``), the config reference.
"""
