"""The study's tasks and their SWE-bench instances: task lists, dataset rows, problem
statements and instance images, read by the runner and the evaluation alike.
"""
