// hack: floods stdout with 200 MB of valid-looking numbers (and 50 MB of stderr) so the trusted
// side holds and parses far more than any answer needs; it must stay a bounded, failed case
// variants: ahc039-tiny, ahc058-tiny
// expect: invalid
// reason: output-size
#include <cstdio>
#include <cstring>
#include <vector>
int main() {
    std::vector<char> block(1 << 20);
    for (size_t i = 0; i < block.size(); i += 2) { block[i] = '1'; block[i + 1] = ' '; }
    for (int i = 0; i < 50; ++i) fwrite(block.data(), 1, block.size(), stderr);
    for (int i = 0; i < 200; ++i) fwrite(block.data(), 1, block.size(), stdout);
    return 0;
}
