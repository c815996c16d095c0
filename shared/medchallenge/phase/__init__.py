"""A challenge phase: every submission's algorithm container on every case, each submission evaluated, then the
leaderboard, on this machine (`--backend local`) or a Slurm cluster (`--backend slurm`); resumable and idempotent.

    medchallenge phase run --challenge NAME|FILE --submissions SUBMISSIONS.toml --cases DIR --ground-truth GT
        --output OUT [--backend local|slurm] [--engine docker|podman] [--jobs N] [--memory-gb G] [--time-limit S]
    medchallenge phase status OUT

Steps (each its own module):
- submissions.py: the TOML file of submissions (team, image tag or `docker save` archive, model tarball), checked;
- cases.py: each case converted by panimg once per phase (OUT/cases/<case-hash>/);
- plan.py: one job per (submission, case), identified by the hash of the image digest, case, model and limits; one
  task spec per job (OUT/tasks/<job_id>.json);
- task.py: `python -m medchallenge.phase.task SPEC` runs one job with medchallenge.jobs.run_job and writes
  OUT/jobs/<job_id>/state.json (records.py reads and writes what a task leaves);
- evaluate.py: `python -m medchallenge.phase.evaluate OUT TEAM...`, the challenge's evaluator over a submission
  (once for submissions with the same jobs) and its pre-flight-style report; leaderboard.py: `python -m
  medchallenge.phase.leaderboard OUT`;
- backend.py: what a backend does (submit tasks, submit steps after them, wait); local.py: this machine; slurm.py
  (with slurm_options.py, the site's options, and slurm_limits.py, the cluster's): a Slurm cluster; leases.py: a job
  run by one task at a time;
- run.py: `phase run`; status.py: `phase status`; layout.py: the paths under OUT; images.py: image digests and
  loading an archive once per node; hashes.py: file hashes kept across runs.

A rerun does only what is missing: a job with a final state (succeeded, or failed on its own: the team's result, as
on grand-challenge) is never run again; one without (never run, stopped, its node lost) is; an evaluation or the
leaderboard is redone only when what it depends on changed.
"""
