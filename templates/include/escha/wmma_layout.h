// Lane layouts of the gfx12 (RDNA4) wave32 WMMA f32_16x16x16_f16 as the fused kernel uses it, and
// where each lane's B elements sit in a trellis tile. Pure index functions: no includes, no
// device code, so the same text compiles for gfx12 (hipRTC / clang), for NVIDIA (NVRTC; the
// NVIDIA-side check of the AMD decoder) and as host C++ (tests/test_amd_layout.py compiles it
// with g++ and checks every lane and element against AMD's documented layout).
//
// The hardware layout (AMD Matrix Instruction Calculator, github.com/ROCm/amd_matrix_instruction_
// calculator, `--architecture rdna4 --instruction v_wmma_f32_16x16x16_f16 --detail-instruction`,
// i.e. the RDNA4 ISA guide's WMMA VGPR layout tables), wave32, 16-bit A and B, lane l, VGPR r
// (0..3 for A and B, 0..7 for C/D), 16-bit half b of the VGPR:
//     A[i][k]: i = l % 16,  k = 8*(r/2) + 4*(l/16) + 2*(r%2) + b
//     B[k][j]: j = l % 16,  k = 8*(r/2) + 4*(l/16) + 2*(r%2) + b      (the same k as A)
//     C/D[i][j]: i = r + 8*(l/16),  j = l % 16
// (NOT RDNA3's layout: there A/B lanes 16..31 repeat lanes 0..15 and D rows are 2r + l/16.)
//
// K relabelling. A lane's 8 halves of A hold hardware k = {4h..4h+3, 8+4h..8+4h+3} (h = l/16),
// i.e. two 8-byte pieces of an x row. We give the 8 halves instead the 8 CONTIGUOUS x columns
// 8h..8h+7 (one 16-byte ds_load_b128 from the address fused.h passes, and the 16 zero bytes it
// keeps for rows >= M stay enough), and the B fragment of the same lane the same 8 weight rows.
// The unit sums over k, and A and B map (lane half, VGPR, half) to the hardware k by the same
// formula, so a relabelling applied to both leaves D unchanged:
//     D[i][j] = sum_(h,r,b) A_hw[i][k_hw(h,r,b)] B_hw[k_hw(h,r,b)][j] = sum_kk x[i][kk] W[kk][j]
// with kk = 8h + 2r + b running over 0..15 once. In our labels, element e = 2r + b (0..7) of lane l:
//     A: row l % 16, k = 8*(l/16) + e;      B: k = 8*(l/16) + e, column n = l % 16
#pragma once

#ifndef ESCHA_INDEX_FN
#define ESCHA_INDEX_FN ESCHA_DEVICE constexpr
#endif

namespace escha {
namespace wmma {

// ---- our labelling of the operands (e = 2*VGPR + half, 0..7)
ESCHA_INDEX_FN int a_row(int lane) { return lane & 15; }
ESCHA_INDEX_FN int a_k(int lane, int e) { return 8 * (lane >> 4) + e; }
ESCHA_INDEX_FN int b_k(int lane, int e) { return 8 * (lane >> 4) + e; }
ESCHA_INDEX_FN int b_n(int lane, int /*e*/) { return lane & 15; }
// accumulator i (VGPR i of D) of lane: output row m and column n of the 16x16 tile
ESCHA_INDEX_FN int acc_row(int lane, int i) { return i + 8 * (lane >> 4); }
ESCHA_INDEX_FN int acc_col(int lane, int /*i*/) { return lane & 15; }

// ---- where B elements come from in the trellis tile (FORMAT.md section 4)
// Position p = 8L + j sits at row 2(L%4) + j%2 + 8((j/2)%2), column L/4 + 8(j/4). Inverting it for
// row k = 8h + e (e = 2r + b) and column n: j = b + 2h + 4(n/8), L = 4(n%8) + r, so
//     p = 32(n%8) + 4(n/8) + 2h + 8r + b = p0(lane) + pos_off(e),   pos_off(e) = 8(e/2) + e%2.
// p0 is even: the 8 states are 4 pairs (p, p+1) at position stride 8.
ESCHA_INDEX_FN int b_p0(int lane) { return 32 * (lane & 7) + 4 * ((lane >> 3) & 1) + 2 * (lane >> 4); }
ESCHA_INDEX_FN int pos_off(int e) { return 8 * (e >> 1) + (e & 1); }
ESCHA_INDEX_FN int b_pos(int lane, int e) { return b_p0(lane) + pos_off(e); }

// FORMAT.md section 4, repeated here so this header stands alone (trellis.h has the same two).
ESCHA_INDEX_FN int fmt_row(int p) { return 2 * ((p >> 3) & 3) + (p & 1) + 8 * ((p >> 1) & 1); }
ESCHA_INDEX_FN int fmt_col(int p) { return (p >> 5) + 8 * ((p >> 2) & 1); }

// ---- the alternative route: decode in the NVIDIA order (lane L: positions 8L..8L+7 as pairs
// q = 0..3, q = j/2) and move the pairs across lanes. Lane l needs for VGPR r the pair
// q = 2(n/8) + h of source lane 4(n%8) + r (n = l%16, h = l/16). In exchange round t (0..3)
// lane l reads source lane 4(n%8) + (t ^ c), c = 2(n/8) + h, which sends its pair t ^ (L%4);
// lane l stores it as VGPR t ^ c. Every round is a permutation of the 32 lanes.
ESCHA_INDEX_FN int xchg_c(int lane) { return 2 * ((lane >> 3) & 1) + (lane >> 4); }
ESCHA_INDEX_FN int xchg_src_lane(int lane, int t) { return 4 * (lane & 7) + (t ^ xchg_c(lane)); }
ESCHA_INDEX_FN int xchg_send_pair(int src_lane, int t) { return t ^ (src_lane & 3); }
ESCHA_INDEX_FN int xchg_dst_reg(int lane, int t) { return t ^ xchg_c(lane); }

}  // namespace wmma
}  // namespace escha
