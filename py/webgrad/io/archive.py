"""The zip layer of a checkpoint: records stored uncompressed under archive/, as torch.save writes
them, and read back with the checks that keep a hostile archive to a clear ValueError.

Writing, each record's data starts 64-byte aligned (padding in the local header's extra field), as
torch.save aligns them for mmap. Reading, from a file's bytes in memory: one record per name, none
compressed or encrypted (so none inflates past its size), CRCs checked, and exactly one data.pkl,
in a folder of any name (PyTorch names it after the file); a TorchScript archive is named as one.
"""
import io
import struct
import zipfile

from ._files import describe

DEVICES_RECORD = "webgrad_devices"   # webgrad's own record: {storage key: the device it was saved from}
_FOLDER = "archive"                  # the records' folder; torch.save uses the same name for file objects
_ALIGN = 64


def write(f, records):
    """A zip archive of records, (name, bytes) pairs each taken only when it is written, to f."""
    with zipfile.ZipFile(f, "w") as archive:
        start = archive.start_dir
        for name, data in records:
            info = zipfile.ZipInfo(f"{_FOLDER}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            # The local header: 30 bytes, the name, a padding field (id "FB", its size, the
            # padding) and, from 1 GiB (forced, so known here), zipfile's 20-byte zip64 field.
            big = len(data) >= 2**30
            header = 30 + len(info.filename.encode()) + 4 + (20 if big else 0)
            pad = -(archive.start_dir - start + header) % _ALIGN
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            with archive.open(info, "w", force_zip64=big) as out:
                out.write(data)


class Archive:
    """The records of a checkpoint file, from its bytes; where names the file in errors."""

    def __init__(self, data, where):
        self.where = where
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, struct.error, UnicodeDecodeError,
                ValueError, OverflowError) as e:
            what = describe(data)
            if data[:4] == b"PK\x03\x04":
                self.fail(f"not a PyTorch checkpoint: a damaged zip archive ({e})")
            if data[:2] == b"\x80\x02":
                self.fail(f"not a PyTorch checkpoint: it is {what}, which is not supported")
            self.fail("not a PyTorch checkpoint (the zip archive torch.save writes): "
                      + (f"it is {what}" if what else "its bytes are no zip archive"))
        self.records = {}
        for info in infos:
            if info.filename in self.records:
                self.fail(f"the archive holds {info.filename!r} twice")
            self.records[info.filename] = info
        if any(name.endswith("/constants.pkl") for name in self.records):
            self.fail("a TorchScript archive (torch.jit.save), not a torch.save checkpoint")
        pickles = [name for name in self.records if name.count("/") == 1 and name.endswith("/data.pkl")]
        if len(pickles) != 1:
            self.fail(f"{len(pickles)} data.pkl records, where a checkpoint has one")
        self.prefix = pickles[0][:-len("data.pkl")]

    def fail(self, why):
        raise ValueError(f"{self.where}: {why}")

    def size(self, name):
        """The size of a record's data in bytes, or None if the archive has none of that name."""
        info = self.records.get(self.prefix + name)
        return None if info is None else info.file_size

    def read(self, name):
        """A record's bytes (CRC-checked), or None if the archive has none of that name."""
        info = self.records.get(self.prefix + name)
        if info is None:
            return None
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:   # and so never inflated past its size
            self.fail(f"record {info.filename!r} is compressed or encrypted (torch.save stores records as they are)")
        try:
            return self.zip.read(info)
        except (zipfile.BadZipFile, EOFError, struct.error) as e:
            self.fail(f"record {info.filename!r} is corrupt: {e}")
