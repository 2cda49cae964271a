// Shared by `fuzz/fuzz_targets/store_reader.rs` and `store/tests/fuzz.rs`
// (which replays every saved finding), through `include!`.
//
// The input is split into `time.log`, `chunks.log`, `values.log` (format 2,
// when bit 1 of the first byte is set) and one record segment (after a
// fixed `meta`). When the first byte is odd, every checksum is recomputed
// so that mutations reach the logic behind the checksums.

const META: &str = "weft-store meta 1\nblock_size 4096\nblocks_per_segment 4\n\
source 0 requests latency_ns:0:u64\nsource 1 packets len:0:u32\n\
index 1 0 latency latency_ns:0:u64 0 - 100,1000,10000\n";

fn header(version: u8, kind: u8) -> Vec<u8> {
    let mut h = b"WEFTST\0".to_vec();
    h.push(version);
    h.push(kind);
    h.extend_from_slice(&4096u32.to_le_bytes());
    h.extend_from_slice(&[0; 3]);
    h
}

/// Recomputes the trailing CRC32 of each `len`-byte entry after the header.
fn reseal_entries(file: &mut [u8], len: usize) {
    for entry in file[16..].chunks_mut(len).filter(|e| e.len() == len) {
        let crc = crc32fast::hash(&entry[..len - 4]);
        entry[len - 4..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Recomputes the CRC32 of each values-log entry, as far as their lengths
/// chain.
fn reseal_values(file: &mut [u8]) {
    let mut at = 16;
    while let Some(head) = file.get(at..at + 16) {
        let len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]) as usize;
        let Some(end) = (at + 16).checked_add(len).filter(|end| *end <= file.len()) else {
            return;
        };
        let crc = crc32fast::hash(&file[at + 4..end]);
        file[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}

/// Writes `data` as a capture (see the fuzz target's docs) into a per-process
/// temp dir, opens it read-only and queries it; must never panic.
pub fn store_reader(data: &[u8]) {
    let [flags, a, b, rest @ ..] = data else {
        return;
    };
    let version = if flags & 2 == 2 { 2 } else { 1 };
    let (c, rest) = match (version, rest) {
        (1, rest) => (0, rest),
        (_, [c, rest @ ..]) => (usize::from(*c) * 8, rest),
        _ => return,
    };
    let (a, b) = (usize::from(*a) * 4, usize::from(*b) * 8);
    let (time, rest) = rest.split_at(a.min(rest.len()));
    let (chunks, rest) = rest.split_at(b.min(rest.len()));
    let (values, records) = rest.split_at(c.min(rest.len()));
    let mut files = [
        (header(version, 3), time),
        (header(version, 2), chunks),
        (header(version, 4), values),
        (header(version, 1), records),
    ]
    .map(|(mut h, body)| {
        h.extend_from_slice(body);
        h
    });
    if flags & 1 == 1 {
        reseal_entries(&mut files[0], if version == 1 { 44 } else { 56 });
        reseal_entries(&mut files[1], 84);
        reseal_values(&mut files[2]);
        for block in files[3][16..].chunks_mut(4096).filter(|b| b.len() == 4096) {
            let crc = crc32fast::hash(&block[4..]);
            block[..4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let dir = std::env::temp_dir().join(format!("weft-fuzz-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("meta"), META).unwrap();
    let names = ["time.log", "chunks.log", "values.log", "records-0000000000.log"];
    for (bytes, name) in files.iter().zip(names) {
        if version == 2 || name != "values.log" {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    if let Ok((snapshot, _)) = weft_store::open_read_only(&dir) {
        let _ = snapshot.records();
        let _ = snapshot.raw_scan(0, 0..=u64::MAX);
        let _ = snapshot.raw_scan(1, 10..=1000);
        let _ = snapshot.indexed_scan(0, 1, 0..=u64::MAX, 50..=5000);
        let _ = snapshot.aggregate(0, 1, 5..=u64::MAX);
        for q in [0.0, 0.5, 0.9999, 1.0] {
            let _ = snapshot.percentile(0, 1, 0..=u64::MAX, q);
        }
    }
}
