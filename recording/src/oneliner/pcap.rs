//! The pcap files `skboutput()` writes, as bpftrace's: classic pcap,
//! microsecond times, raw IP link type (the packets start where the
//! program's offset says, past any Ethernet header it skips).

use std::{collections::HashMap, fs::File, io::Write as _, path::Path};

use weft_oneliner::Packets;

/// `LINKTYPE_RAW`: packets that start with their IPv4 or IPv6 header.
const LINKTYPE_RAW: u32 = 101;
/// The largest packet a file says it holds (the kernel copies less).
const SNAPLEN: u32 = 65_535;

/// The files written, by the path the program names; each is created
/// (through [`crate::output::create`], which refuses links planted in
/// others' directories) at its first packet.
#[derive(Default)]
pub struct PcapFiles {
    files: HashMap<String, File>,
}

impl Packets for PcapFiles {
    fn write(&mut self, path: &str, wall_ns: i128, packet: &[u8]) -> std::io::Result<()> {
        let file = match self.files.entry(path.to_owned()) {
            std::collections::hash_map::Entry::Occupied(file) => file.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let mut file =
                    crate::output::create(Path::new(path)).map_err(std::io::Error::other)?;
                file.write_all(&file_header())?;
                entry.insert(file)
            }
        };
        file.write_all(&record(wall_ns, packet))
    }
}

/// A pcap file's header.
fn file_header() -> Vec<u8> {
    let mut header = Vec::with_capacity(24);
    header.extend_from_slice(&0xa1b2_c3d4_u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    // The time zone and the times' accuracy, both 0.
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&SNAPLEN.to_le_bytes());
    header.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
    header
}

/// A packet's record: its time, its length twice (the whole packet is
/// kept), its bytes.
fn record(wall_ns: i128, packet: &[u8]) -> Vec<u8> {
    let seconds = u32::try_from(wall_ns.div_euclid(1_000_000_000)).unwrap_or(0);
    let micros = u32::try_from(wall_ns.rem_euclid(1_000_000_000) / 1000).unwrap_or(0);
    let len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
    let mut record = Vec::with_capacity(16 + packet.len());
    for word in [seconds, micros, len, len] {
        record.extend_from_slice(&word.to_le_bytes());
    }
    record.extend_from_slice(packet);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_hold_each_packet_after_the_header_as_pcap_readers_take_it() {
        let dir = std::env::temp_dir().join(format!("weft-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.pcap");
        let mut files = PcapFiles::default();
        let packet = [0x45u8, 0, 0, 20];
        let path_text = path.to_str().unwrap();
        files.write(path_text, 1_500_000_002_000, &packet).unwrap();
        files
            .write(path_text, 1_600_000_000_999, &packet[..2])
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!(word(0), 0xa1b2_c3d4);
        assert_eq!(word(20), LINKTYPE_RAW);
        // 1500 s and 2 µs; 4 bytes kept of 4.
        assert_eq!((word(24), word(28), word(32), word(36)), (1500, 2, 4, 4));
        assert_eq!(&bytes[40..44], &packet);
        assert_eq!((word(44), word(48), word(52)), (1600, 0, 2));
        assert_eq!(bytes.len(), 24 + 16 + 4 + 16 + 2);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
