"""Programs the benchmarks run in their own processes (plain, or under horovodrun), one measurement each.

Each writes its result as JSON to the path or directory given by --out; none imports the harness.
"""
