# Stand-in for the get-pip.py that ansible-test downloads to bootstrap pip in the virtual
# environments of its sanity tests (scripts/test copies it into ~/.ansible/test/cache/, where
# ansible-test looks first). Bootstraps pip with ensurepip in a subprocess (ensurepip in-process
# sets PIP_CONFIG_FILE=/dev/null), then installs what ansible-test asked for from the index.
import subprocess
import sys

if __name__ == '__main__':
    subprocess.check_call([sys.executable, '-m', 'ensurepip', '--upgrade'])
    args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
    subprocess.check_call([sys.executable, '-m', 'pip', 'install', *args])
