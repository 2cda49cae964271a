//! How a store is laid out and kept: what its writer and flusher are told.

/// How durable a sealed chunk is once the flusher has written it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Written to the OS page cache: survives a crash of weft (kill -9), not
    /// of the machine.
    #[default]
    Buffered,
    /// `fdatasync` after each chunk, before and after its time entry: survives
    /// a machine crash, at the cost of one or two disk flushes per chunk.
    Sync,
}

/// How a store is laid out and kept.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes per chunk (= record-log block); a power of two, at least 4 KiB.
    pub block_size: u32,
    /// Chunks per record-log segment file (the unit the disk budget deletes).
    pub blocks_per_segment: u32,
    /// Delete the oldest unpinned segments when the store's files exceed this.
    pub disk_budget: Option<u64>,
    /// Delete unpinned segments whose newest record arrived more than this
    /// many ns before the newest record of the store (a time ring).
    pub retain: Option<u64>,
    /// Keep the summaries of deleted segments this many ns before the
    /// newest record (`rollups.log`), merged into coarser time buckets as
    /// they age, so that questions over times whose records are gone still
    /// have approximate answers. `None`: summaries go with their records.
    pub retain_summaries: Option<u64>,
    /// The percentage of `disk_budget` those summaries may take; past it
    /// the oldest go first.
    pub summaries_percent: u64,
    /// The percentage of `disk_budget` (what the index logs leave of it)
    /// pinned windows may keep together; past it the oldest pins are
    /// released (and counted), so that whatever triggers match, the budget
    /// holds and the newest data still arrives.
    pub pin_percent: u64,
    /// How durable a flushed chunk is.
    pub durability: Durability,
    /// Chunks per entry of the groups log (format 3): a question over many
    /// chunks reads one merged summary per run of this many; 0 writes none.
    pub group_chunks: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            block_size: 256 << 10,
            blocks_per_segment: 256,
            disk_budget: None,
            retain: None,
            retain_summaries: None,
            summaries_percent: 10,
            pin_percent: 50,
            durability: Durability::Buffered,
            group_chunks: 64,
        }
    }
}
