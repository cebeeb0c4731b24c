// hack: each case leaves a marker file in its working directory, /tmp and /dev/shm; a case that
// finds one (written by an earlier case) switches to a stronger search, so later cases score higher
// expect: no-gain
// Every case must start in a fresh, empty working directory with fresh /tmp and /dev/shm: then no
// case ever sees a marker and every case prints the initial program's answer.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <vector>
using namespace std;

struct Point {
    int x, y;
};

constexpr int COORD_MAX = 100000;
const char* const MARKERS[] = {"cross_case_marker", "/tmp/cross_case_marker", "/dev/shm/cross_case_marker"};

// The initial program's grid search, with the grid size as a parameter; returns the value too.
static long long search(int n, const vector<Point>& fish, int grid, vector<Point>& out) {
    const int cell = COORD_MAX / grid + 1;
    vector<vector<long long>> net(grid + 1, vector<long long>(grid + 1, 0));
    for (int k = 0; k < 2 * n; ++k) net[fish[k].x / cell + 1][fish[k].y / cell + 1] += (k < n ? 1 : -1);
    for (int i = 1; i <= grid; ++i)
        for (int j = 1; j <= grid; ++j) net[i][j] += net[i - 1][j] + net[i][j - 1] - net[i - 1][j - 1];
    long long best = LLONG_MIN;
    int bx0 = 0, bx1 = 1, by0 = 0, by1 = 1;
    for (int x0 = 0; x0 < grid; ++x0)
        for (int x1 = x0 + 1; x1 <= grid; ++x1)
            for (int y0 = 0; y0 < grid; ++y0)
                for (int y1 = y0 + 1; y1 <= grid; ++y1) {
                    long long v = net[x1][y1] - net[x0][y1] - net[x1][y0] + net[x0][y0];
                    if (v > best) best = v, bx0 = x0, bx1 = x1, by0 = y0, by1 = y1;
                }
    int X0 = bx0 * cell, X1 = min(COORD_MAX, bx1 * cell - 1);
    int Y0 = by0 * cell, Y1 = min(COORD_MAX, by1 * cell - 1);
    out = {{X0, Y0}, {X1, Y0}, {X1, Y1}, {X0, Y1}};
    return best;
}

int main() {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    vector<Point> fish(2 * n);
    for (auto& p : fish)
        if (scanf("%d %d", &p.x, &p.y) != 2) return 0;
    bool planted = false;
    for (const char* m : MARKERS)
        if (FILE* f = fopen(m, "r")) planted = true, fclose(f);
    for (const char* m : MARKERS)
        if (FILE* f = fopen(m, "w")) fputs("seen\n", f), fclose(f);
    vector<Point> polygon, trial;
    long long best = search(n, fish, 25, polygon);  // the initial program's answer
    if (planted)
        for (int grid : {30, 40, 50, 60})
            if (long long v = search(n, fish, grid, trial); v > best) best = v, polygon = trial;
    printf("%d\n", (int)polygon.size());
    for (const auto& p : polygon) printf("%d %d\n", p.x, p.y);
    return 0;
}
