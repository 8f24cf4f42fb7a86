//! `lazynet nlf prebuild`: writes one NLF meta file per payload size for a
//! media file (see `lazynet::nlf`), with a progress bar and one summary line
//! per payload size.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use lazynet::nlf::{prebuild_with, PrebuildOptions, PrebuildSummary};

/// Prebuilds `media` for each size in `payloads` (RTP framing if `rtp`),
/// writing the meta files into `out` or next to the media.
pub fn prebuild_cmd(
    media: &Path,
    payloads: &[usize],
    rtp: bool,
    out: Option<&Path>,
    bit_rate: u64,
) -> anyhow::Result<()> {
    if payloads.is_empty() {
        bail!("no payload sizes given");
    }
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    }
    let style = ProgressStyle::with_template(
        "{msg:>14} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
    )
    .context("progress bar template")?
    .progress_chars("=> ");
    for &payload in payloads {
        let bar = ProgressBar::new(0).with_style(style.clone());
        bar.set_message(format!("payload {payload}"));
        let opts = PrebuildOptions {
            payload,
            rtp,
            out_dir: out,
            nominal_bit_rate: bit_rate,
        };
        let result = prebuild_with(media, &opts, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        });
        bar.finish_and_clear();
        let s = result
            .with_context(|| format!("prebuilding {} for payload {payload}", media.display()))?;
        println!("{}", summary_line(media, payload, rtp, &s));
    }
    Ok(())
}

fn summary_line(media: &Path, requested: usize, rtp: bool, s: &PrebuildSummary) -> String {
    let kind = if s.mpegts {
        format!("MPEG-TS, {} PCRs", s.pcrs)
    } else {
        "opaque, nominal rate".to_string()
    };
    let rounded = if s.payload_size != requested {
        format!(" (rounded down from {requested} to whole TS packets)")
    } else {
        String::new()
    };
    format!(
        "{}: payload {}{}{}: {} packets, {:.2} MB, {:.2} s, {:.3} Mbit/s, {} -> {} in {}",
        media.display(),
        s.payload_size,
        rounded,
        if rtp { " RTP" } else { "" },
        s.packets,
        s.bytes as f64 / 1e6,
        s.duration.as_secs_f64(),
        s.bit_rate as f64 / 1e6,
        kind,
        s.meta.display(),
        fmt_elapsed(s.elapsed),
    )
}

fn fmt_elapsed(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazynet::nlf::{meta_path, MetaFile};

    #[test]
    fn prebuild_cmd_writes_meta_files() {
        let dir = std::env::temp_dir().join(format!("lazynet-nlf-cmd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A small MPEG-TS: 50 packets, a PCR on every 5th.
        let mut media = Vec::new();
        for j in 0..50u64 {
            let mut p = [0xFFu8; 188];
            p[0] = 0x47;
            p[1] = 0x01;
            p[2] = 0x00;
            if j % 5 == 0 {
                let base = j * 188 * 216 / 300;
                p[3] = 0x30;
                p[4] = 7;
                p[5] = 0x10;
                p[6] = (base >> 25) as u8;
                p[7] = (base >> 17) as u8;
                p[8] = (base >> 9) as u8;
                p[9] = (base >> 1) as u8;
                p[10] = (((base & 1) << 7) as u8) | 0x7E;
                p[11] = 0;
            } else {
                p[3] = 0x10;
            }
            media.extend_from_slice(&p);
        }
        let path = dir.join("t.ts");
        std::fs::write(&path, &media).unwrap();
        let out = dir.join("meta");
        prebuild_cmd(&path, &[1316, 2048], true, Some(&out), 3_000_000).unwrap();
        for size in [1316, 2048] {
            let m = meta_path(&path, size, true, Some(&out));
            let mf = MetaFile::open(&m, &path).unwrap();
            assert!(mf.rtp() && mf.mpegts());
            assert_eq!(mf.payload_size(), if size == 1316 { 1316 } else { 1880 });
        }
        assert!(prebuild_cmd(&path, &[], false, None, 3_000_000).is_err());
        let e = prebuild_cmd(&path, &[100], false, None, 3_000_000).unwrap_err();
        assert!(format!("{e:#}").contains("payload size 100"), "{e:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
