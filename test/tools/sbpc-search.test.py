"""Compares the reports sbpc-search.test wrote (argument: its directory)."""
import json
import sys

root = sys.argv[1]


def load(name):
    with open(f"{root}/{name}/report.json") as f:
        return json.load(f)


def time(report):
    return report["totals"]["estimated_step_time_s"]


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30)


for mesh, others in (("4", ("drec", "dp", "tp")), ("22", ("drec", "dp-tp"))):
    label = "x=4" if mesh == "4" else "2x2"
    exact = load(f"exact-{mesh}")
    if mesh == "4":
        search = exact["search"]
        print(f"{label} exact: search {search['algorithm']}, candidates "
              f"{search['candidates_evaluated'] > 0}, plan cost is the estimate "
              f"{close(search['plan_seconds'], time(exact))}")
    print(f"{label} auto == exact", close(time(load(f'auto-{mesh}')), time(exact)))
    print(f"{label} exact <= {' '.join(others)}:",
          *[time(exact) <= time(load(f"{o}-{mesh}")) * (1 + 1e-12) for o in others])
    if mesh == "4":
        plan = exact["search"]["plan_seconds"]
        ops = [o for o in exact["ops"] if o["op"] != "graph.constant"]
        print(f"{label} runner-ups: every op {all('runner_up' in o for o in ops)}, "
              "none better than the optimum",
              all(o["runner_up"]["plan_time_s"] >= plan * (1 - 1e-12) for o in ops))
