"""The last stages: batch tables collected into datasets, paired-bootstrap statistics, the
tables and figures.
"""
