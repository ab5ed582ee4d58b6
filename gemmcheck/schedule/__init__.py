"""Run scheduling: how a run's tests are divided over hosts, processes, GPUs and cores, and
what the run's processes share. The pytest plugins (gemmcheck.pytest_plugin) call it from
their hooks; nothing here implements a hook.

- units.py        units of work (tests that share a kill-matrix row) and the pytest-xdist
                  scheduler that deals them to workers
- gpus.py         which GPUs a run uses and which one each worker owns
- gpu_turns.py    workers that share a GPU take turns for device timing
- shard.py        --gemm-shard: a run split over hosts, balanced by recorded durations
- cores.py        each worker's share of the host's cores
- rerun.py        the rest of a session in a fresh process after a lost CUDA context
- shared_work.py  work a run's workers do once for all of them (gemmcheck.judge.once)
- runstats.py     what the run's test reports said: durations, phases, whether anything ran

Most of it works on node ids, counts, files and locks. Where it needs pytest's objects it
takes them from the plugin's hook that calls it: units reads --gemm-shard-durations and asks
the pytest_gemm_work_unit hook for a test's unit, and builds pytest-xdist's scheduler;
gpus, gpu_turns and shared_work keep the controller's and a worker's state in config.stash
and pass it to workers in pytest-xdist's workerinput; rerun starts a child pytest with the
session's own options; runstats reads test reports. shard.py and cores.py need none.
"""
