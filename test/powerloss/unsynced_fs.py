#!/usr/bin/python3
"""A FUSE file system for power-loss tests: it keeps in memory what a disk would not yet hold.

    unsynced_fs.py BACKING MOUNTPOINT

Mounts BACKING's tree at MOUNTPOINT, held wholly in memory. What a program writes is seen at once
(as through a page cache), but it is on "the disk" only once the program made it durable:
- a file's data and size: by fsync/fdatasync of the file, or by a write through a descriptor
  opened with O_SYNC/O_DSYNC;
- creates, renames, unlinks, mkdir/rmdir: by any fsync after them (a journaling file system such as
  ext4 commits its metadata journal in order, so a later fsync of anything carries them; nothing
  before an fsync, though: a rename whose directory was never fsynced, with no fsync after it, is
  lost).

Writing one of these commands to MOUNTPOINT/.powerloss ends the session as a power loss would:
    drop SEED     nothing that was not made durable survives;
    meta SEED     every metadata operation survives (the file system committed its journal on its
                  own timer, as ext4 does every 5 s) but no data that was not made durable (files
                  created or renamed there can be empty: the "zero-length file" of XFS and ext4);
    random SEED   each page (4 KiB) written since its file's last sync survives or not, at random,
                  and so does its file's new size; a random prefix of the metadata operations since
                  the last fsync survives (the torn, reordered write-back of a real disk).
The state that survives is written to BACKING, and every later operation fails with EIO: the
caller then unmounts (`fusermount -u -z MOUNTPOINT`). An unmount without a command is a clean
shutdown: everything written is kept.

Prints "mounted" on standard output once the file system serves.
"""
import errno
import os
import random
import shutil
import stat
import sys
import threading
import time

from fusepy import FUSE, FuseOSError

PAGE = 4096
CONTROL = '/.powerloss'
ROOT = 1


class Node:
    __slots__ = ('ino', 'is_dir', 'mode', 'data', 'durable_size', 'saved', 'mtime')

    def __init__(self, ino, is_dir, mode):
        self.ino = ino
        self.is_dir = is_dir
        self.mode = mode
        self.data = bytearray()
        self.durable_size = 0
        # page number -> the page's durable content (taken at its first change since the last sync)
        self.saved = {}
        self.mtime = time.time()

    def save_pages(self, start, end):
        """Keeps the durable content of the pages covering bytes [start, end) before they change."""
        if end <= start:
            return
        for p in range(start // PAGE, (end - 1) // PAGE + 1):
            if p in self.saved:
                continue
            old = bytes(self.data[p * PAGE:(p + 1) * PAGE])
            self.saved[p] = old + bytes(PAGE - len(old))

    def sync(self):
        self.saved.clear()
        self.durable_size = len(self.data)

    def crashed(self, rng):
        """The content this file has after a power loss (rng None: only what was synced)."""
        data = bytearray(self.data)
        for p, old in self.saved.items():
            if rng is not None and rng.random() < 0.5:
                continue
            end = (p + 1) * PAGE
            if len(data) < end:
                data.extend(bytes(end - len(data)))
            data[p * PAGE:end] = old
        size = self.durable_size
        if rng is not None and rng.random() < 0.5:
            size = len(self.data)
        if len(data) < size:
            data.extend(bytes(size - len(data)))
        del data[size:]
        return bytes(data)


class UnsyncedFs:
    def __init__(self, backing):
        self.backing = backing
        self.lock = threading.RLock()
        self.nodes = {}
        self.next_ino = ROOT
        # dir ino -> {name: ino}: as programs see it, and as the disk has it
        self.ns = {}
        self.ns_durable = {}
        # metadata operations since the last fsync, in order: ('set', dir, name, ino) / ('del', dir, name)
        self.journal = []
        self.handles = {}
        self.next_fh = 1
        self.dead = False
        root = self.new_node(True, 0o755)
        assert root.ino == ROOT
        self.ns[ROOT] = {}
        self.load(backing, ROOT)
        self.ns_durable = {d: dict(e) for d, e in self.ns.items()}

    # ---------------------------------------------------------------- tree
    def new_node(self, is_dir, mode):
        n = Node(self.next_ino, is_dir, mode)
        self.next_ino += 1
        self.nodes[n.ino] = n
        if is_dir:
            self.ns[n.ino] = {}
        return n

    def load(self, real, dir_ino):
        for name in sorted(os.listdir(real)):
            p = os.path.join(real, name)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                n = self.new_node(True, stat.S_IMODE(st.st_mode))
                self.ns[dir_ino][name] = n.ino
                self.load(p, n.ino)
            elif stat.S_ISREG(st.st_mode):
                n = self.new_node(False, stat.S_IMODE(st.st_mode))
                with open(p, 'rb') as f:
                    n.data = bytearray(f.read())
                n.durable_size = len(n.data)
                self.ns[dir_ino][name] = n.ino

    def lookup(self, path):
        ino = ROOT
        for part in path.split('/'):
            if not part:
                continue
            entries = self.ns.get(ino)
            if entries is None or part not in entries:
                raise FuseOSError(errno.ENOENT if entries is not None else errno.ENOTDIR)
            ino = entries[part]
        return self.nodes[ino]

    def parent(self, path):
        head, name = path.rsplit('/', 1)
        d = self.lookup(head)
        if not d.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        return d, name

    def log(self, op):
        self.journal.append(op)
        apply_op(self.ns, op)

    def commit_journal(self):
        for op in self.journal:
            apply_op(self.ns_durable, op)
        self.journal.clear()

    # ---------------------------------------------------------------- power loss
    def power_off(self, mode, seed):
        if mode not in ('drop', 'meta', 'random'):
            raise FuseOSError(errno.EINVAL)
        rng = random.Random(seed) if mode == 'random' else None
        ns = {d: dict(e) for d, e in self.ns_durable.items()}
        kept = len(self.journal) if mode == 'meta' else rng.randint(0, len(self.journal)) if rng is not None else 0
        for op in self.journal[:kept]:
            apply_op(ns, op)
        self.write_backing(ns, rng)
        self.dead = True

    def write_backing(self, ns, rng):
        for name in os.listdir(self.backing):
            p = os.path.join(self.backing, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
        self.write_tree(ns, ROOT, self.backing, rng)

    def write_tree(self, ns, dir_ino, real, rng):
        for name, ino in ns.get(dir_ino, {}).items():
            n = self.nodes[ino]
            p = os.path.join(real, name)
            if n.is_dir:
                os.mkdir(p, n.mode)
                self.write_tree(ns, ino, p, rng)
            else:
                with open(p, 'wb') as f:
                    f.write(n.crashed(rng))
                os.chmod(p, n.mode)

    # ---------------------------------------------------------------- FUSE
    def __call__(self, op, *args):
        with self.lock:
            if self.dead:
                # What is in flight when the power goes may still close; nothing else runs.
                if op in ('release', 'releasedir', 'flush', 'destroy'):
                    return 0
                raise FuseOSError(errno.EIO)
            fn = getattr(self, op, None) if op in FUSE_OPS else None
            if fn is None:
                raise FuseOSError(errno.ENOSYS)
            return fn(*args)

    def init(self, path):
        print('mounted', flush=True)

    def destroy(self, path):
        # A clean unmount: everything written is kept.
        for n in self.nodes.values():
            if not n.is_dir:
                n.sync()
        self.commit_journal()
        self.write_backing(self.ns_durable, None)

    def getattr(self, path, fh=None):
        if path == CONTROL:
            return dict(st_mode=stat.S_IFREG | 0o600, st_nlink=1, st_size=0, st_uid=0, st_gid=0,
                        st_atime=0, st_mtime=0, st_ctime=0)
        n = self.node_of(path, fh)
        if n.is_dir:
            return dict(st_mode=stat.S_IFDIR | n.mode, st_nlink=2, st_size=4096, st_uid=0, st_gid=0,
                        st_atime=n.mtime, st_mtime=n.mtime, st_ctime=n.mtime)
        return dict(st_mode=stat.S_IFREG | n.mode, st_nlink=1, st_size=len(n.data), st_uid=0, st_gid=0,
                    st_blocks=(len(n.data) + 511) // 512, st_atime=n.mtime, st_mtime=n.mtime, st_ctime=n.mtime)

    def access(self, path, amode):
        if path != CONTROL:
            self.lookup(path)
        return 0

    def statfs(self, path):
        return dict(f_bsize=PAGE, f_frsize=PAGE, f_blocks=1 << 24, f_bfree=1 << 23, f_bavail=1 << 23,
                    f_files=1 << 20, f_ffree=1 << 19, f_favail=1 << 19, f_namemax=255)

    def readdir(self, path, fh):
        d = self.lookup(path)
        if not d.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        return ['.', '..'] + list(self.ns[d.ino].keys())

    def opendir(self, path):
        self.lookup(path)
        return 0

    def releasedir(self, path, fh):
        return 0

    def fsyncdir(self, path, datasync, fh):
        self.commit_journal()
        return 0

    def mkdir(self, path, mode):
        d, name = self.parent(path)
        if name in self.ns[d.ino]:
            raise FuseOSError(errno.EEXIST)
        n = self.new_node(True, stat.S_IMODE(mode))
        self.log(('set', d.ino, name, n.ino))
        return 0

    def rmdir(self, path):
        d, name = self.parent(path)
        n = self.lookup(path)
        if not n.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        if self.ns[n.ino]:
            raise FuseOSError(errno.ENOTEMPTY)
        self.log(('del', d.ino, name))
        return 0

    def unlink(self, path):
        d, name = self.parent(path)
        n = self.lookup(path)
        if n.is_dir:
            raise FuseOSError(errno.EISDIR)
        self.log(('del', d.ino, name))
        return 0

    def rename(self, old, new):
        sd, sname = self.parent(old)
        n = self.lookup(old)
        dd, dname = self.parent(new)
        existing = self.ns[dd.ino].get(dname)
        if existing is not None and self.nodes[existing].is_dir and self.ns[existing]:
            raise FuseOSError(errno.ENOTEMPTY)
        self.log(('rename', sd.ino, sname, dd.ino, dname, n.ino))
        return 0

    def chmod(self, path, mode):
        self.lookup(path).mode = stat.S_IMODE(mode)
        return 0

    def chown(self, path, uid, gid):
        return 0

    def utimens(self, path, times=None):
        self.lookup(path).mtime = time.time()
        return 0

    def open_handle(self, n, flags):
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = (n, flags)
        return fh

    def create(self, path, mode, fi):
        if path == CONTROL:
            fi.fh = 0
            return 0
        d, name = self.parent(path)
        existing = self.ns[d.ino].get(name)
        if existing is not None:
            n = self.nodes[existing]
            if fi.flags & os.O_TRUNC:
                n.save_pages(0, len(n.data))
                del n.data[:]
        else:
            n = self.new_node(False, stat.S_IMODE(mode))
            self.log(('set', d.ino, name, n.ino))
        fi.fh = self.open_handle(n, fi.flags)
        return 0

    def open(self, path, fi):
        if path == CONTROL:
            fi.fh = 0
            fi.direct_io = 1
            return 0
        n = self.lookup(path)
        if n.is_dir:
            raise FuseOSError(errno.EISDIR)
        fi.fh = self.open_handle(n, fi.flags)
        return 0

    def release(self, path, fi):
        self.handles.pop(fi.fh, None)
        return 0

    def flush(self, path, fi):
        return 0

    def node_of(self, path, fi):
        if fi is not None and fi.fh in self.handles:
            return self.handles[fi.fh][0]
        return self.lookup(path)

    def read(self, path, size, offset, fi):
        if fi.fh == 0:
            return b''
        n = self.node_of(path, fi)
        return bytes(n.data[offset:offset + size])

    def write(self, path, data, offset, fi):
        if fi.fh == 0:
            words = bytes(data).decode().split()
            self.power_off(words[0], int(words[1]))
            return len(data)
        n, flags = self.handles[fi.fh]
        end = offset + len(data)
        n.save_pages(offset, min(end, len(n.data)))
        if offset > len(n.data):
            n.data.extend(bytes(offset - len(n.data)))
        n.data[offset:end] = data
        n.mtime = time.time()
        if flags & (os.O_SYNC | os.O_DSYNC):
            for p in range(offset // PAGE, (end - 1) // PAGE + 1):
                n.saved.pop(p, None)
            n.durable_size = len(n.data)
            self.commit_journal()
        return len(data)

    def truncate(self, path, length, fi=None):
        if path == CONTROL:
            return 0
        n = self.node_of(path, fi)
        if length < len(n.data):
            n.save_pages(length, len(n.data))
            del n.data[length:]
        else:
            n.data.extend(bytes(length - len(n.data)))
        n.mtime = time.time()
        return 0

    def fsync(self, path, datasync, fi):
        if fi.fh != 0:
            self.node_of(path, fi).sync()
        self.commit_journal()
        return 0


FUSE_OPS = frozenset(('init', 'destroy', 'getattr', 'access', 'statfs', 'readdir', 'opendir', 'releasedir', 'fsyncdir',
                      'mkdir', 'rmdir', 'unlink', 'rename', 'chmod', 'chown', 'utimens', 'create', 'open',
                      'release', 'flush', 'read', 'write', 'truncate', 'fsync'))


def apply_op(ns, op):
    kind = op[0]
    if kind == 'set':
        ns.setdefault(op[1], {})[op[2]] = op[3]
    elif kind == 'del':
        ns.setdefault(op[1], {}).pop(op[2], None)
    else:
        _, sdir, sname, ddir, dname, ino = op
        ns.setdefault(sdir, {}).pop(sname, None)
        ns.setdefault(ddir, {})[dname] = ino


def main():
    backing, mountpoint = sys.argv[1], sys.argv[2]
    FUSE(UnsyncedFs(os.path.abspath(backing)), mountpoint, raw_fi=True, foreground=True, nothreads=True,
         fsname='unsynced', no_remote_lock=True)


if __name__ == '__main__':
    main()
