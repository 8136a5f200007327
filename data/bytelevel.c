/* bytelevel.c — GPT-2's byte-level alphabet; see bytelevel.h. */
#include "data/bytelevel.h"

void bytelevel_alphabet(unsigned cp[256]) {
    unsigned extra = 0;
    for (unsigned b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp[b] = printable ? b : 256 + extra++;
    }
}
