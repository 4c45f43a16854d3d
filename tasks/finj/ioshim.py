"""``LD_PRELOAD`` shim for the ``ioerr`` fault (the nearest mechanism to the kernel's ``fail_make_request``
that this machine offers; see ``programs.py``).

The shim wraps ``read``/``write``/``pread64``/``pwrite64`` of the applications the engine starts. On a
regular file, every ``interval``-th call fails with ``EIO`` with ``probability`` percent, where
``interval probability`` is read from the switch file ``$NWFINJ_IOERR_CTL`` (checked once per 100 calls;
absent file = no errors). The ``ioerr`` program creates the switch for its duration and removes it at exit.
Built with the system C compiler into the run directory; without a compiler the fault is unavailable.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_pread)(int, void *, size_t, off_t);
static ssize_t (*r_pwrite)(int, const void *, size_t, off_t);
static unsigned long calls, checks;
static int interval = 0, prob = 0;
static unsigned int seed = 12345;

static void refresh(void) {
    const char *p = getenv("NWFINJ_IOERR_CTL");
    interval = 0; prob = 0;
    if (!p) return;
    FILE *f = fopen(p, "r");
    if (!f) return;
    if (fscanf(f, "%d %d", &interval, &prob) != 2) { interval = 0; prob = 0; }
    fclose(f);
}

static int inject(int fd) {
    if (fd <= 2) return 0;
    if ((checks++ % 100) == 0) refresh();
    if (interval <= 0) return 0;
    if ((++calls % (unsigned long)interval) != 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if ((int)(rand_r(&seed) % 100) >= prob) return 0;
    errno = EIO;
    return 1;
}

ssize_t read(int fd, void *b, size_t n) {
    if (!r_read) r_read = dlsym(RTLD_NEXT, "read");
    if (inject(fd)) return -1;
    return r_read(fd, b, n);
}
ssize_t write(int fd, const void *b, size_t n) {
    if (!r_write) r_write = dlsym(RTLD_NEXT, "write");
    if (inject(fd)) return -1;
    return r_write(fd, b, n);
}
ssize_t pread64(int fd, void *b, size_t n, off_t o) {
    if (!r_pread) r_pread = dlsym(RTLD_NEXT, "pread64");
    if (inject(fd)) return -1;
    return r_pread(fd, b, n, o);
}
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) {
    if (!r_pwrite) r_pwrite = dlsym(RTLD_NEXT, "pwrite64");
    if (inject(fd)) return -1;
    return r_pwrite(fd, b, n, o);
}
"""


def build(out_dir: Path) -> tuple[Path | None, str]:
    """Compile the shim into ``out_dir/libnwioerr.so``: (path, "") or (None, why it is unavailable)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None, "no C compiler (cc/gcc) to build the LD_PRELOAD shim"
    out_dir.mkdir(parents=True, exist_ok=True)
    src = out_dir / "nwioerr.c"
    lib = out_dir / "libnwioerr.so"
    src.write_text(SOURCE)
    r = subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], capture_output=True, text=True, timeout=120
    )
    if r.returncode != 0:
        return None, f"building the LD_PRELOAD shim failed: {r.stderr.strip().splitlines()[-1:]}"
    return lib, ""
