# medchallenge: `make test` and `make demo` set everything up on a fresh machine (see README.md).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
TRAIN_VENV := .venv-train
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' shared/pyproject.toml)
export PYTHONDONTWRITEBYTECODE := 1
export COMPOSE_BAKE := false

# GPU=1: the GPU variant of the algorithm images (compose.gpu.yaml; onnxruntime-gpu with CUDA 12).
GPU ?= 0
COMPOSE := docker compose -f compose.yaml$(if $(filter 1,$(GPU)), -f compose.gpu.yaml)
# the hospital deployment (README "In a hospital"): the gateway and its job runner, which runs the algorithm images
# compose.yaml builds; the job runner joins the group of the Docker socket
HOSPITAL := docker compose -f compose.hospital.yaml --profile hospital
export DOCKER_GID ?= $(shell stat -c %g /var/run/docker.sock 2>/dev/null)

.PHONY: venv wheels wheels-gpu images test demo bench save models docker docker-ready browser dicom-tools slurm gc-pack codabench codabench-images lock clean

venv: $(VENV)/.installed
$(VENV)/.installed: requirements/runtime.txt requirements/dev.txt shared/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements/runtime.txt -r requirements/dev.txt
	$(PY) -m pip install -q --no-deps -e shared
	touch $@

# Wheels for the image builds: downloaded (or, for pure-Python sdists, built) here, bind-mounted into the
# builds, never copied into image layers. Carry this folder to build without network (air-gapped sites).
wheels: wheelhouse/.complete wheelhouse/debs/docker.io.deb wheelhouse/debs/slurm/.complete \
  $(if $(filter 1,$(GPU)),wheelhouse/gpu/.complete)
wheelhouse/.complete: requirements/runtime.txt requirements/build.txt | venv
	$(PY) -m pip wheel -q --no-deps -w wheelhouse -r requirements/runtime.txt -r requirements/build.txt
	touch $@
# The Docker client of the hospital's job-runner image: Debian bookworm's docker.io package, fetched by apt on this
# (bookworm) host; the image build takes only its /usr/bin/docker (gateway/Dockerfile, stage job-runner).
wheelhouse/debs/docker.io.deb:
	mkdir -p wheelhouse/debs && cd wheelhouse/debs && rm -f docker.io_*.deb && apt-get download docker.io \
	  && mv docker.io_*.deb docker.io.deb
# Slurm's client commands of the gateway-slurm image (a gateway with routes on a Slurm cluster): Debian's slurm-client
# of this (bookworm) host's apt and the packages it needs beyond the image's base (apt's plan against the base's
# dpkg status), fetched here; the image build installs them (gateway/Dockerfile, stage gateway-slurm). Its major
# version must match the cluster's (bookworm: 22.05).
wheelhouse/debs/slurm/.complete: | docker-ready
	mkdir -p wheelhouse/debs/slurm && cd wheelhouse/debs/slurm && rm -f *.deb \
	  && docker run --rm python:3.11-slim cat /var/lib/dpkg/status > base-status \
	  && apt-get download $$(apt-get -s -o Dir::State::status=$$PWD/base-status install --no-install-recommends \
	       slurm-client | sed -n 's/^Inst \([^ ]*\) (.*/\1/p') && rm base-status && touch .complete
# onnxruntime-gpu and the CUDA 12 libraries (about 2 GB) for the GPU images; make test builds one of them.
# In their own folder, which only the algorithm images' build context carries (see .dockerignore).
wheels-gpu: wheelhouse/gpu/.complete
wheelhouse/gpu/.complete: requirements/gpu.txt | venv
	$(PY) -m pip wheel -q --no-deps -w wheelhouse/gpu -r requirements/gpu.txt
	touch $@

# A Docker engine, Compose v2 and the offline base image on Debian 12 (idempotent; needs root or sudo).
docker:
	bash .ci/provision-docker.sh

# Docker usable, or provisioned as CI does (root), or one line saying what to run.
docker-ready:
	@bash .ci/require-docker.sh

# A headless browser (Debian's chromium-headless-shell) for the leaderboard page test (root installs it).
browser:
	@bash .ci/provision-browser.sh

# DICOM tools (Debian's dicom3tools: dciodvfy; orthanc: the PACS of the gateway tests; root installs them).
dicom-tools:
	@bash .ci/provision-dicom.sh

# A one-node Slurm cluster and Podman for the phase backend's tests (Debian's slurm-wlm, munge and podman; root
# installs and starts them, another user is told what is missing).
slurm:
	@bash .ci/provision-slurm.sh

images: docker-ready wheels
	$(COMPOSE) build
	$(HOSPITAL) build gateway job-runner

# The tests in TEST_WORKERS processes (pytest-xdist; each file in one process, so its module fixtures run once),
# then the `serial` ones one at a time: tests/e2e and the tests that count what runs at once (they share the engine,
# the Slurm node and its CPUs, whose timing some of them measure). Both run; either failing fails.
TEST_WORKERS ?= 2
test: docker-ready browser dicom-tools slurm venv wheels wheels-gpu
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial" tests; parallel=$$?; \
	  $(PY) -m pytest -m serial tests; serial=$$?; exit $$((parallel || serial))

demo: docker-ready venv images
	$(PY) -m medchallenge.demo

bench: docker-ready venv images
	$(PY) benchmarks/run.py --out bench/results.json

# The files a participant uploads to grand-challenge and a hospital carries offline (docker load < file).
save: images
	mkdir -p dist
	set -o pipefail; for image in $$( ($(COMPOSE) config --images; $(HOSPITAL) config --images gateway job-runner) | sort -u); do \
	  name=$${image#*/}; name=$${name%%:*}; \
	  docker save "$$image" | gzip -1 > "dist/$$name-$(VERSION).tar.gz.part" || exit 1; \
	  mv "dist/$$name-$(VERSION).tar.gz.part" "dist/$$name-$(VERSION).tar.gz"; \
	done
	cd dist && sha256sum *-$(VERSION).tar.gz > SHA256SUMS && cat SHA256SUMS

# What an organiser uploads to grand-challenge besides the images: per challenge dist/gc/<challenge>/ with
# ground_truth.tar.gz, model.tar.gz (challenges with an algorithm) and sockets.json. Ground truth: the demo data
# (make demo) unless <PREFIX>_GROUND_TRUTH names another folder, e.g. make gc-pack TB_CAVERNS_GROUND_TRUTH=/data/gt
gc-pack: venv
	$(PY) -m medchallenge.grand_challenge.pack --all --out dist/gc

# Codabench competition bundles, per scoring configuration dist/codabench/<config>.zip (README "Running a challenge
# on grand-challenge, AIcrowd or Codabench"); reference data and sample submission: the demo data (make demo) unless
# <PREFIX>_GROUND_TRUTH and <PREFIX>_PREDICTIONS name other folders, as for make gc-pack.
codabench: venv
	$(PY) -m medchallenge.platforms.codabench --all --out dist/codabench

# The image each bundle names: the configuration's evaluator image (make save) run as root, as Codabench's worker
# needs; a self-hosted instance builds it from the bundle's codabench-image.Dockerfile (two lines).
codabench-images: images
	$(PY) -m medchallenge.platforms.codabench --build-images

# Retrain the bundled models on synthetic data (PyTorch on CPU; not part of CI). OBJECT_CXR_STEPS: the steps of the
# six stages of the committed model (algorithms/object_cxr/README.md; stages 1-5 were run on a time budget). Seeds:
# 1000 training (stages 1-3), 3000 training (stages 4-5, hard negatives), both at 512 px; 6000 training at the
# generator's default size, 1,500-3,000 px (stage 6, hard negatives); 4100, 1100 and 4300 validation at the default
# size (pre- and post-processing, operating threshold); the benchmark's held-out seeds 2323 (default size) and 777
# (512 px) are in none of them.
OBJECT_CXR_STEPS ?= 222 144 197 487 644 1200
models: $(TRAIN_VENV)/.installed
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_tb_caverns.py --seed 0 --out algorithms/tb_caverns/model/tb_caverns.onnx
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_imageclef_caption.py --seed 0 \
	  --out algorithms/imageclef_caption/model/imageclef_caption.onnx
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_ribfrac.py --seed 0 --steps 3011 --val-every 300 \
	  --out build/ribfrac-detector.onnx
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_ribfrac_classifier.py --seed 0 --cases 60 --steps 1000 \
	  --batch 16 --base-channels 4 --detector build/ribfrac-detector.onnx --out algorithms/ribfrac/model/ribfrac.onnx \
	  --threshold 0.5 --min-voxels 60 --confidence-mass-voxels 100 --min-fracture-probability 0.7 \
	  --classifier-weight 0.5 --min-typed-probability 0.9
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_train --images 400 --seed 1000 --size 512
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_object_cxr.py --data build/object_cxr_train --seed 0 \
		--steps $(word 1,$(OBJECT_CXR_STEPS)) --out build/object_cxr_stage1.onnx
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_object_cxr.py --data build/object_cxr_train --seed 1 \
		--steps $(word 2,$(OBJECT_CXR_STEPS)) --lr 1e-3 --resume build/object_cxr_stage1.onnx --out build/object_cxr_stage2.onnx
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_object_cxr.py --data build/object_cxr_train --seed 2 \
		--steps $(word 3,$(OBJECT_CXR_STEPS)) --lr 7e-4 --resume build/object_cxr_stage2.onnx --out build/object_cxr_stage3.onnx
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_train4 --images 300 --seed 3000 --size 512
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_object_cxr.py --data build/object_cxr_train4 --seed 3 \
		--steps $(word 4,$(OBJECT_CXR_STEPS)) --lr 1e-3 --resume build/object_cxr_stage3.onnx --hard-fraction 0.25 \
		--object-fraction 0.5 --out build/object_cxr_stage4.onnx
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_object_cxr.py --data build/object_cxr_train4 --seed 4 \
		--steps $(word 5,$(OBJECT_CXR_STEPS)) --lr 5e-4 --resume build/object_cxr_stage4.onnx --hard-fraction 0.25 \
		--object-fraction 0.5 --out build/object_cxr_stage5.onnx
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_full6000_0 --images 200 --seed 6000
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_full6000_1 --images 200 \
		--first 200 --seed 6000
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/train_object_cxr.py --data build/object_cxr_full6000_0 \
		build/object_cxr_full6000_1 --seed 5 --steps $(word 6,$(OBJECT_CXR_STEPS)) --lr 1e-3 --crop 256 \
		--resume build/object_cxr_stage5.onnx --hard-fraction 0.25 --object-fraction 0.5 \
		--out algorithms/object_cxr/model/object_cxr.onnx
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_val_4100 --images 50 --seed 4100
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_val_4100_175 --images 25 \
		--first 175 --seed 4100
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_val_1100 --images 50 --seed 1100
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_val_4300_0 --images 100 --seed 4300
	PYTHONPATH=shared $(PY) -m medchallenge.synth object-cxr-images --out build/object_cxr_val_4300_1 --images 100 \
		--first 100 --seed 4300
	PYTHONPATH=shared $(TRAIN_VENV)/bin/python training/tune_object_cxr.py --model algorithms/object_cxr/model/object_cxr.onnx \
		--data build/object_cxr_val_4100 build/object_cxr_val_4100_175 build/object_cxr_val_1100 \
		build/object_cxr_val_4300_0 build/object_cxr_val_4300_1
$(TRAIN_VENV)/.installed: requirements/train.txt requirements/runtime.txt
	test -x $(TRAIN_VENV)/bin/python || $(PYTHON) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/pip install -q -r requirements/runtime.txt -r requirements/train.txt
	touch $@

# Re-pin: resolve requirements/runtime.in in a scratch venv and write the full lock.
lock:
	rm -rf /tmp/medchallenge-lock && $(PYTHON) -m venv /tmp/medchallenge-lock
	/tmp/medchallenge-lock/bin/pip install -q -r requirements/runtime.in
	{ echo "# Exact pins of every runtime package (images, make test, make demo). Regenerate: make lock"; \
	  /tmp/medchallenge-lock/bin/pip freeze; } > requirements/runtime.txt

clean:
	rm -rf demo bench dist wheelhouse .pytest_cache
