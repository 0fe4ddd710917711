"""The cluster: the Apptainer images a study needs, the route (where agents, sandboxes and
evaluation run), and the preflight that says whether a site is ready.
"""
