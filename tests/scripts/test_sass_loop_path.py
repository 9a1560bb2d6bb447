"""scripts/sass_loop_path.py: the instructions per trip of a WGMMA loop along the no-tile-change path, and the
stall cycles where the listing has the encodings, on hand-written SASS listings in nvdisasm's format (no GPU
or disassembler needed)."""

import importlib.util
import pathlib

_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "sass_loop_path.py"
_spec = importlib.util.spec_from_file_location("sass_loop_path", _SCRIPT)
sass_loop_path = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_loop_path)

LISTING = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;                  /* 0x000fe40000000f00 */
.L_x_3:
        /*0010*/                   WARPGROUP.ARRIVE ;
        /*0020*/                   QGMMA.64x96x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT ;
        /*0030*/               @P1 BRA `(.L_x_4) ;
        /*0040*/                   I2F.U32.RP R4, UR10 ;
        /*0050*/                   MUFU.RCP R4, R4 ;
.L_x_4:
        /*0060*/                   FFMA R30, R24, R2, R30 ;
        /*0070*/              @!P2 BRA `(.L_x_5) ;
        /*0080*/                   FFMA R31, R25, R2, R31 ;
.L_x_5:
        /*0090*/                   BRA `(.L_x_6) ;
        /*00a0*/                   NOP ;
.L_x_6:
        /*00b0*/              @!P0 BRA `(.L_x_3) ;
        /*00c0*/                   EXIT ;
"""


def test_counts_the_path_that_skips_tile_change_code_only():
    instructions, labels, stalls = sass_loop_path.parse(LISTING.splitlines())
    assert len(instructions) == 13 and labels == {".L_x_3": 1, ".L_x_4": 6, ".L_x_5": 9, ".L_x_6": 11}
    assert stalls == [None] * 13  # no encodings' second halves in this listing
    found = list(sass_loop_path.loops(instructions, labels))
    assert found == [(".L_x_3", 1, 11)]
    path = sass_loop_path.common_path(instructions, labels, 1, 11)
    # The division is skipped (tile change), the FFMA behind the other forward branch is not, and the
    # unconditional branch jumps over the NOP.
    assert [sass_loop_path.opcode(instructions[i]) for i in path] == ["WARPGROUP", "QGMMA", "BRA", "FFMA", "BRA",
                                                                      "FFMA", "BRA", "BRA"]


def test_reports_each_loop_and_fails_without_one(tmp_path, capsys):
    listing = tmp_path / "k.sass"
    listing.write_text(LISTING)
    assert sass_loop_path.main([str(listing)]) == 0
    out = capsys.readouterr().out
    assert "loop .L_x_3: 11 static, 8 on the common path (1 WGMMA, 2 FFMA)" in out
    plain = tmp_path / "plain.sass"
    plain.write_text("        /*0000*/                   EXIT ;\n")
    assert sass_loop_path.main([str(plain)]) == 1


# `nvdisasm -c -hex`: each instruction's second 64-bit half on the next line; its bits 41-44 are the stall count
# (1, 5, 2 and 6 here).
HEX_LISTING = """
.L_x_7:
        /*0000*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT ;  /* 0x00e0000008187df3 */
                                                                                            /* 0x000fe2000b8008ff */
        /*0010*/                   FFMA R30, R24, R2, R30 ;                                   /* 0x000000021e1e7223 */
                                                                                            /* 0x000fca000000001e */
        /*0020*/                   UIADD3 UR8, UR8, 0x2, URZ ;                                /* 0x0000000208087890 */
                                                                                            /* 0x000fe4000fffe03f */
        /*0030*/              @!P0 BRA `(.L_x_7) ;                                          /* 0xfffffffc00f08947 */
                                                                                            /* 0x000fcc000383ffff */
"""


def test_sums_the_stall_counts_of_the_path_when_the_encodings_are_there(tmp_path, capsys):
    listing = sass_loop_path.parse(HEX_LISTING.splitlines())
    assert listing.stalls == [1, 5, 2, 6]
    path = tmp_path / "hex.sass"
    path.write_text(HEX_LISTING)
    assert sass_loop_path.main([str(path), "--dump"]) == 0
    out = capsys.readouterr().out
    assert "loop .L_x_7: 4 static, 4 on the common path (1 WGMMA, 1 FFMA, 14 stall cycles)" in out
    assert "    s5  FFMA R30, R24, R2, R30" in out
