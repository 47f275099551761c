"""The pandas baseline for `scalechat analyze`: the same join, written the
plain way (read_csv with dtypes, merge, groupby). Prints per-step figures as
JSON so the benchmark can check both tools agree.

usage: python3 analyze_baseline.py FILE.csv (scalechat bench analyze writes it out and runs it)
       python3 analyze_baseline.py --steps STEPS.txt (the older headerless format, one file per step)
"""
import os
import json
import sys

import numpy as np
import pandas as pd


def main(path):
    df = pd.read_csv(
        path,
        dtype={"step": "category", "room": "category", "event": "category",
               "message_id": "float64", "sender_id": "float64",
               "client_id": "int64", "unix_us": "int64", "lag_us": "float64"},
    )
    joins = df.loc[df.event == "Joined", ["step", "room", "client_id", "unix_us"]]
    sent = df.loc[df.event == "Sent", ["step", "room", "sender_id", "message_id", "unix_us"]]
    recv = df.loc[df.event == "Received", ["step", "sender_id", "message_id", "unix_us"]]
    del df

    # Expected deliveries: members joined at or before the due time.
    exp = sent.merge(joins, on=["step", "room"], suffixes=("", "_j"))
    exp = exp[exp.unix_us_j <= exp.unix_us]
    exp_per_msg = exp.groupby(["sender_id", "message_id"]).size().rename("expected")

    # Deliveries: Received joined to Sent.
    m = recv.merge(sent[["sender_id", "message_id", "unix_us", "step"]],
                   on=["sender_id", "message_id"], how="left", suffixes=("_r", ""))
    orphans = m[m.unix_us.isna()].groupby("step_r", observed=True).size()
    m = m[m.unix_us.notna()]
    m["lat_ms"] = (m.unix_us_r - m.unix_us) / 1000.0
    recv_per_msg = m.groupby(["sender_id", "message_id"]).size().rename("received")

    per_msg = sent.set_index(["sender_id", "message_id"])[["step"]]
    per_msg = per_msg.join(exp_per_msg).join(recv_per_msg).fillna({"expected": 0, "received": 0})
    per_msg["lost"] = (per_msg.expected - per_msg.received).clip(lower=0)

    out = {}
    for step, g in m.groupby("step", observed=True):
        lat = g.lat_ms.to_numpy()
        pm = per_msg[per_msg.step == step]
        out[str(step)] = {
            "sent": int(len(pm)),
            "expected": int(pm.expected.sum()),
            "received": int(len(g)),
            "lost": int(pm.lost.sum()),
            "orphans": int(orphans.get(step, 0)),
            "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)),
            "mean_ms": float(lat.mean()),
            "max_ms": float(lat.max()),
        }
    json.dump(out, sys.stdout, indent=1)


def legacy(steps_path):
    """The older format: ids are text (UUIDs), every message expects
    room_size deliveries, steps are named ROOMSxSIZE as analyze names them."""
    out = {}
    base = os.path.dirname(steps_path)
    for line in open(steps_path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        rooms, size, path = line.split(",", 2)
        df = pd.read_csv(os.path.join(base, path), header=None,
                         names=["message_id", "sender_id", "client_id", "event", "unix_us"],
                         dtype={"message_id": "int64", "sender_id": "object", "client_id": "object",
                                "event": "category", "unix_us": "int64"})
        sent = df.loc[df.event == "Sent", ["sender_id", "message_id", "unix_us"]]
        recv = df.loc[df.event == "Received", ["sender_id", "message_id", "unix_us"]]
        del df
        m = recv.merge(sent, on=["sender_id", "message_id"], how="left", suffixes=("_r", ""))
        orphans = int(m.unix_us.isna().sum())
        m = m[m.unix_us.notna()]
        lat = ((m.unix_us_r - m.unix_us) / 1000.0).to_numpy()
        per_msg = m.groupby(["sender_id", "message_id"]).size()
        received = sent.set_index(["sender_id", "message_id"]).join(per_msg.rename("received")).received.fillna(0)
        out[f"{int(rooms)}x{int(size)}"] = {
            "sent": int(len(sent)),
            "expected": int(len(sent)) * int(size),
            "received": int(len(m)),
            "lost": int((int(size) - received).clip(lower=0).sum()),
            "orphans": orphans,
            "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)),
            "mean_ms": float(lat.mean()),
            "max_ms": float(lat.max()),
        }
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--steps":
        legacy(sys.argv[2])
    else:
        main(sys.argv[1])
