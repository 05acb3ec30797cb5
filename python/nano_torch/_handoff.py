"""What the caller of a Python launch and its ranks hand each other: the training (the payload),
rank 0's result, and a rank's error. Each is sealed with the launch's own key (HMAC-SHA256 over a
purpose and the bytes, so one kind never passes for another) and checked before anything of it
is unpickled. As files they live only in the caller's private job folder (made by mkdtemp:
0700, the caller's own), each made O_EXCL|O_NOFOLLOW, 0600, under a name nobody can take first,
and only the ranks the launcher placed on the caller's host (NANO_LAUNCH_HOST=1) look there: a
folder of the same name on another host is never read. Between hosts the sealed bytes travel
through the process group and are checked on arrival."""
import hashlib
import hmac
import os
import stat

KEY_VARIABLE = "NANO_PYTHON_KEY"  # the launch's key, handed to its ranks with their environment
LAUNCH_HOST_VARIABLE = "NANO_LAUNCH_HOST"  # "1" on the ranks of the caller's host (the launcher's plan)
_MAGIC = b"nano_torch-sealed 1\n"
_MAC_BYTES = 32


class HandoffError(RuntimeError):
    """A file or message of a launch that its key does not verify, or a job folder or file that
    is not the caller's own: nothing of it is used."""


def new_key():
    """A fresh launch key: 32 random bytes, as hex."""
    return os.urandom(32).hex()


def key_from_environment():
    """This rank's launch key (bytes); HandoffError when it was not started by a Python launch."""
    text = os.environ.get(KEY_VARIABLE, "")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise HandoffError(f"nano_torch: this rank has no valid {KEY_VARIABLE}: it was not started by a nano_torch "
                           "launch")
    return key


def on_caller_host():
    """Whether the launcher placed this rank on the caller's host (never judged by what a folder holds)."""
    return os.environ.get(LAUNCH_HOST_VARIABLE) == "1"


def _mac(key, purpose, data):
    return hmac.new(key, purpose.encode() + b"\0" + data, hashlib.sha256).digest()


def seal(key, purpose, data):
    """Pure: `data` (bytes) with its seal for `purpose` ("payload", "result", "error")."""
    return _MAGIC + _mac(key, purpose, data) + data


def unseal(key, purpose, blob, what):
    """Pure: the bytes `blob` seals for `purpose`; HandoffError naming `what` (a file, a rank)
    when its seal does not verify: nothing of it may be unpickled then."""
    head = len(_MAGIC) + _MAC_BYTES
    if len(blob) < head or not blob.startswith(_MAGIC) or not hmac.compare_digest(
            blob[len(_MAGIC):head], _mac(key, purpose, blob[head:])):
        raise HandoffError(f"nano_torch: {what} was not made by this launch (its seal does not verify): nothing of "
                           "it is used")
    return blob[head:]


def check_private_folder(path):
    """HandoffError unless `path` is a folder (not a link) of this user that nobody else may enter."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise HandoffError(f"nano_torch: job folder {path}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise HandoffError(f"nano_torch: job folder {path} is not this user's private folder (owner uid "
                           f"{st.st_uid}, mode {stat.filemode(st.st_mode)}): refusing to use it")


def write_file(path, data):
    """`data` into `path` whole (write_beside)."""
    write_beside(path, lambda f: f.write(data))


def write_beside(path, write):
    """What `write(file)` writes, into `path` whole: a temporary of an unpredictable name beside it
    (O_EXCL, never through a link, 0600), renamed into place (a link at `path` is replaced, never
    written through)."""
    part = f"{path}.part-{os.urandom(8).hex()}"
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(part, path)
    except BaseException:
        try:
            os.unlink(part)
        except OSError:
            pass
        raise


def read_file(path):
    """The bytes of `path`, a plain file of this user, never through a link; HandoffError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise HandoffError(f"nano_torch: cannot read {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise HandoffError(f"nano_torch: {path} is not a file of this user: refusing to read it")
        return f.read()
