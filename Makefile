# sparkfold: the commands a user and CI run. See README.md.
PYTHON ?= python3
VENV ?= .venv

.PHONY: demo prereqs setup lab lab-down lab-status converge test lint unit molecule sanity build clean

demo:  ## on a fresh machine (root): prerequisites, venv, lab, site.yml, smoke, a short benchmark
	scripts/demo

prereqs:  ## the Debian packages the lab and the tests need, installed when missing (root)
	scripts/prereqs

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

test:  ## everything CI runs, on a fresh machine too (root): prerequisites, venv, lint, sanity, unit, molecule
	scripts/prereqs
	scripts/setup
	scripts/test all

build:
	$(VENV)/bin/ansible-galaxy collection build --force --output-path .cache/build .
