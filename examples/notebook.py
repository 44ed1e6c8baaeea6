"""What a notebook cell does with kubetrain.client: submit a job, follow it to the end, read its history.

Run it where kubectl works (the kubeconfig's current context and namespace): python examples/notebook.py
"""

from __future__ import annotations

from kubetrain.client import Client, Job, JobFailed


def show(job: Job) -> None:
    epoch = f" epoch {job.epoch}/{job.epochs}" if job.epoch else ""
    print(f"{job.phase}{epoch} {job.metrics or ''}".rstrip(), flush=True)


def main() -> int:
    client = Client()
    job = client.create(
        name="mnist-notebook",
        image="kubetrain/mnist:0.1.0",
        command=["python", "-m", "mnist", "--data-dir", "/data/mnist", "--epochs", "3"],
        workers=2,
        resources={"cpu": "2", "memory": "4Gi"},
        data={"claimName": "hdf5-data"},  # the volume `python -m mnist.convert` wrote to
        checkpoint={"claimName": "checkpoints"},
    )
    print(f"created {job.namespace}/{job.name}")
    try:
        client.wait(job.name, timeout=3600, on_change=show)
    except JobFailed as failed:
        print(f"failed: {failed.reason}: {failed.message}")
        return 1
    for row in client.history(job.name):  # client.history(job.name, as_frame=True) with pandas
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
