"""The foundation every stage stands on: atomic writes, one-line user errors, fault injection,
files read once, output paths, seeds, stage logs, wording, SIF files and the config schema.
"""
