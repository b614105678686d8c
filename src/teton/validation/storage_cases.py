"""Storage validation case: the Llama 3 storage fabric as published vs the per-server model.

``teton validate`` (:mod:`teton.validation.cases`) runs ``tectonic_llama3_rows`` and wraps its
plain-dict rows as ``ValidationRow``. Published (Llama 3 paper, arXiv 2407.21783, Sec. 3.3.1):
240 PB on 7,500 SSD servers, 2 TB/s sustainable and 7 TB/s peak throughput. Predicted:
``tectonic-llama3``'s per-server figures (see :mod:`teton.spec.storage`); nothing here is
fitted to the published numbers.
"""

from __future__ import annotations

from teton.spec.storage import storage_system

SOURCE = "Llama 3 herd paper, arXiv 2407.21783, Sec. 3.3.1"


def _row(case, metric, published, predicted, tolerance, source, note, kind="value") -> dict:
    return dict(case=case, metric=metric, published=published, predicted=predicted, tolerance=tolerance,
                source=source, note=note, kind=kind)


def tectonic_llama3_rows() -> list[dict]:
    s = storage_system({"preset": "tectonic-llama3"})
    case = "tectonic-llama3 storage (7,500 servers)"
    return [
        _row(case, "peak_write_bytes_s", 7e12, s.peak_write_bytes_s(), 0.10, SOURCE,
                      "servers x NIC goodput / RS(9,6) amplification (12.5 Gb/s per server: assumption)"),
        _row(case, "sustained_write_bytes_s", 2e12, s.sustained_write_bytes_s(), 0.10, SOURCE,
                      "flash endurance: 1 DWPD over 4 x 7.68 TB E1.S per server / RS(9,6)"),
        # the preset's 4 SSDs per server were derived from these 240 PB / 7,500 servers: a check
        _row(case, "raw_capacity_bytes", 240e15, s.raw_capacity_bytes(), 0.10, SOURCE,
             "4 x 7.68 TB E1.S per server (derived from this figure: a check, not a prediction)", kind="check"),
    ]
