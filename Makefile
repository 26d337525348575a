# sparkfold: the commands a user and CI run. See README.md.
PYTHON ?= python3
VENV ?= .venv

.PHONY: setup lab lab-down lab-status converge test lint unit molecule sanity build clean

setup:  ## Python venv with pinned deps, and this checkout linked as sparkfold.cluster
	scripts/setup

lab:  ## bring the simulated pair up (podman, systemd, sshd, rail networks)
	scripts/lab up

lab-down:  ## tear the simulated pair down
	scripts/lab down

lab-status:
	scripts/lab status

converge:  ## run site.yml against the lab pair
	$(VENV)/bin/ansible-playbook -i inventory/lab site.yml

lint:
	scripts/test lint

unit:
	scripts/test unit

sanity:
	scripts/test sanity

molecule:
	scripts/test molecule

test:  ## everything CI runs: lint, sanity, unit, molecule
	scripts/test all

build:
	$(VENV)/bin/ansible-galaxy collection build --force --output-path .cache/build .
