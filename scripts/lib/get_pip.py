"""Put pip into an empty virtual environment, the way pip's get-pip.py does, without downloading it.

ansible-test creates its virtual environments (its --venv controller and one per sanity test) without
pip, then runs a get-pip.py that it downloads from ci-files.testing.ansible.com into
~/.ansible/test/cache/get_pip_<version>.py, unless a file is already there. That host is not
reachable from this project's machines (only package registries are), so scripts/test.sh puts this
file there instead.

Like get-pip.py, it puts a pip wheel on sys.path and runs that pip's "install --upgrade
--force-reinstall" with the arguments it was given (ansible-test passes e.g. "pip==24.2"), so the
requested pip still comes from the package index. get-pip.py embeds its wheel; this uses the one
that ships with the Python running it (ensurepip's bundle, or Debian's python3-pip-whl).
"""

import glob
import os
import sys


def bundled_pip_wheel():
    """Return the path of a pip wheel that came with this Python."""
    folders = ['/usr/share/python-wheels']
    try:
        import ensurepip  # pylint: disable=import-outside-toplevel
    except ImportError:
        pass
    else:
        folders.insert(0, os.path.join(os.path.dirname(ensurepip.__file__), '_bundled'))
    for folder in folders:
        wheels = sorted(glob.glob(os.path.join(folder, 'pip-*-py3-none-any.whl')))
        if wheels:
            return wheels[-1]
    sys.exit('get_pip.py: no pip wheel bundled with %s (looked in %s); on Debian or Ubuntu: '
             'apt-get install python3-venv' % (sys.executable, ', '.join(folders)))


def main():
    """Install the requested pip with the bundled one, as get-pip.py does."""
    # get-pip.py options that only stop it from adding setuptools and wheel, which this never adds.
    args = [arg for arg in sys.argv[1:] if arg not in ('--no-setuptools', '--no-wheel')]
    sys.path.insert(0, bundled_pip_wheel())
    from pip._internal.cli.main import main as pip_main  # pylint: disable=import-outside-toplevel,import-error

    sys.exit(pip_main(['install', '--upgrade', '--force-reinstall'] + args))


if __name__ == '__main__':
    main()
