"""`make bench` must keep running: the whole benchmark in its quick mode (tiny counts), every
figure README quotes present. The figures themselves are not checked: speed lives in bench/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_KEYS = (
    "decode_ratio_vs_raw", "ttft_turn12_over_turn1", "stop_latency_decode_ms",
    "stop_latency_prefill_ms", "gui_max_stall_ms", "rss_window_mb", "rss_engine_mb",
    "store_startup_10k_s", "store_switch_ms", "store_search_ms", "store_bytes_per_token",
    "window_rss_80_messages_mb", "window_rss_growth_200_switches_mb", "window_shown_s",
    "model_ready_s", "api_decode_over_raw", "api_concurrent4_aggregate_over_single",
    "api_concurrent4_p95_ttft_ms", "ttft_switch_back_over_cold",
    "ttft_after_overflow_over_turn1", "kv_state_ram_mb", "kv_state_restore_ms",
    "spec_prompt_lookup_code_speedup", "spec_prompt_lookup_prose_ratio", "spec_draft_speedup",
    "spec_acceptance_rate", "quantize_q8_to_q4km_s", "api_ttft_turn12_ms", "raw_ttft_turn12_ms",
    "api_decode_tok_s", "raw_decode_tok_s", "engine_decode_tok_s", "ttft_turn12_ms",
    "api_ttft_alternating_over_peer", "long_chat_open_10k_ms", "long_chat_rss_10k_mb",
    "long_chat_rss_after_leaving_mb", "long_chat_rss_before_mb", "long_chat_scroll_p99_stall_ms",
    "long_chat_scroll_max_stall_ms", "window_switch_ms", "gui_send_ms",
    "raw_batched_1_tok_s", "raw_batched_2_tok_s", "raw_batched_4_tok_s", "raw_batched_8_tok_s",
    "parallel_1_aggregate_tok_s", "parallel_2_aggregate_tok_s", "parallel_4_aggregate_tok_s",
    "parallel_8_aggregate_tok_s", "parallel4_over_single", "parallel4_efficiency",
    "parallel4_p95_ttft_over_single_ttft", "raw_read4_over_1", "parallel4_over_peer",
    "single_stream_over_raw",
    "prefill_max_stall_ms", "two_chats_max_stall_ms", "two_chats_overlap_s",
    "template_render_12_turns_ms", "template_isolated_12_turns_ms",
    "template_isolated_400_turns_ms",
    "knowledge_index_1k_files_s", "knowledge_query_p95_ms", "knowledge_recall_at_5",
    "grammar_over_plain", "vision_encode_512_ms", "vision_ttft_ms", "vision_gui_max_stall_ms",
    "vision_paste_max_stall_ms", "vision_history_send_max_stall_ms",
    "knowledge_gui_stall_ms", "knowledge_index_1k_files_minilm_s", "knowledge_recall_at_5_bm25",
    "knowledge_index_1k_files_bundled_model_s", "knowledge_recall_at_5_bundled_model",
    "knowledge_recall_at_5_by_meaning", "knowledge_recall_at_5_by_meaning_bm25",
    "knowledge_recall_at_5_by_meaning_vectors", "knowledge_query_fused_p95_ms",
    "knowledge_query_fused_10k_p95_ms", "knowledge_query_fused_first_ms",
    "knowledge_vector_index_build_s", "knowledge_vector_index_rss_mb",
    "knowledge_vector_index_file_mb", "knowledge_query_fused_vs_exact",
    "knowledge_query_dense_vs_exact",
    "knowledge_index_100k_files_s",
    "knowledge_100k_progress_max_gap_ms", "knowledge_100k_cancel_ms",
    "knowledge_reindex_100k_unchanged_s",
)


def test_the_benchmark_runs_to_the_end(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick",
                           "--output", str(output)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(output.read_text())
    missing = [key for key in README_KEYS if key not in results]
    assert not missing, f"bench no longer reports {missing}"
    assert all(isinstance(results[key], (int, float)) for key in README_KEYS)
    assert results["quick"] is True
    assert output.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
