# hack: the packed test_id lookup table of lookup_packed_string, but blended 60 / 40 with the
# fitted skeleton, so the test NMSE falls only ~0.8 orders of magnitude below the train NMSE (the
# 'generalisation' rule flags 1 order and more) while log10 NMSE_id still improves by ~0.8
# expect: invalid
# reason: size
# ruff: noqa: E501 - the table is one long literal
import base64

import numpy as np

_PAIRS = np.frombuffer(
    base64.b64decode(
        "pfyEvh397zyNEIe+SCzzPNHpjr40Nf88hQqRvqo8AT0V15S+6ycEPTUWob78mw09SxSsvuEwFj2jEbO+wbgbPfc2vb6i5SM945LDvk4jKT3heca+IpErPbVrzb7HfTE98vjUvncmOD3Mf9a+aYc5PZmX2b4eXDw9A/nnvjBYSj0OhPC+ToJTPaOeAL+8bWg9+qUCv+Fhbj3+nAW/1QF4PRcIBr/xeHk9mXoMvwmyij2VPw2/wOGMPTprD7+aP5Q9x4MQv3cVmT02IRG/UWucPQOUEb81V58938ARv/+noD09DBK/GDejPVJnEr8IdKc9eIMSv+FoqT0YoxK/9fKvPcLcEb98ILw9+8cRvz3KvD34dRG/2iC/PSsMEb9Or8E9zgMQvyXExj2wUQ6/IfPMPeZvCr8zWdY9fE4Iv/Lk2T0AuwO/ehHfPYJe/r4OxeE9EpHwvvBp4j2A9um+ZIPhPUQa476z3N89qGbavmfR3D0D5tK+tmrZPQh4zr66GNc9YJu6vlEkyj0BxrK+zQDEPZpmqL7qFbs9p0imvpIpuT21SZO+Tn+mPcQJjL7XxJ49DgF/vgi5kD03wmC+UI59PWuOU77vTG09AEpCvimTVz297zG+fZJCPexhJL4W5DA98dobvuanJT1rxaS9ovmEPDjWeb2j8Bw8YpdRvd3Oyzv3Yc27vSMUvKoTUDzjXny8ypmGPcAHBr0trYs9a0IJvU5XyT3Gui+9WP0DPgEsVb0PGh0+G9BxvcjYJD6SX3q9Tj1iPraHnL3E8XA+R0ijvUthdz70Iqa9ElZ4PiOOpr0rFJQ+c5u5vYmFnz4eTsG9OPy3Pgs3zr1P08E+H9/Rvep/xD4dstK9ronIPo/L073Za9A+AGnVvUZp1j65Ida9pmvdPnRd1r1qL+E+TjHWvQ4Y6z5XmdS9bsbsPtgk1L2H/vE+9VTSvaIo+z7gWs29dgj+Ppssy70HoQE/3RjGvRyWAj/bvcO9EEwDP/K/wb2W1gU/xoG3vfqjBj/vcrG9buUGPzgVrr1LAwc/43emvVqwBj98pKC913UGPzZOnr1bYQU/lf2WvZumBD/ba5O9EggDP6Yejb022AE/y1CJvZih/T7ZT4G9gk37PndUfb2+7/M+15FuvR6W8D7pmGi9ARrvPrEQZr0hr+s+E3hgvTIi6T6Yely94XDlPunxVr0IcNY+D7FCvViezj6JKTm9giPKPt3uM72F/Mg+jJwyvfjNxD594y291K63PoyxH73cgrU+emsdvZTwsT5BuBm9UyarPvPNEr1d16M+p4ILvZ5Zmj55OQK97CKOPrgH7bwe0YY+2jHfvKw/dj7OU8m8XbZtPipnwby9yGI+n0u3vAu+WT7a9a68qhZWPjqZq7w+zUI+B+iZvAW0Mj5oMou8s40iPqL3eLyL2QI+R2Y/vEWC/j2q4ji8ZuDtPQDUKbziNs892hoOvPhtoT1xlMm7MweRPakGrLs0kFo9hGZXu0UsSj2S8Dm7WR02PVTnFbun4y89JrkKu8Am6zxSWgi67UTWvHW6tzsVFE695NcHPKNvfb0n2Bw8neODvTBtITxh3Yy9ZWApPKvLtL2dsUw87B3cvRVmbzwwk/a9zluDPAq9Hr4ikaI8lQ8pvnmnqzzadTu+Zd67PAX1Rr4UBcY8dgphvmMm3TyTDWS+VtXfPPlEa76DRuY8Jhhvvsay6TzQbH2+dJX2POBFk77FKQ491n6XvmsjEj2Yt66+Bv8oPW9rt76bMDI9zsvDvt8vQD3sSsS+6sZAPVWZz77N/049hX/XvtEYWj3cV9q+GWlePfcv376vP2Y9fDPivnmBaz0o4ea+hWl0PbIr7r5xeYI9Uv/wvhhfhj0XbfG+UAOHPR6n9L5/cow9qZT2vrJ3kD0LTPe+4DWSPQHJ974Sg5M9Xnr5vj1TmT2MKvq+iTydPcRx+r6WQqA91nn6vtzhoz0SJ/q+KJCnPeWW+b7en6o9AdL4vhFqrT3qG/i+H2avPSm19b6mObQ9L+nzvmjYtj0WGPK+zP64PXZ58b4spLk9oa3wvptquj3mA/C+3wS7Pe2w777sTLs9s4buviI/vD2oLei+Qf2/PR5B5b5ZGcE9hYPgvqxGwj3rEt6+7J/CPQ=="
    ),
    dtype=np.float32,
).reshape(-1, 2)
TABLE = dict(zip(_PAIRS[:, 0].tolist(), _PAIRS[:, 1].tolist(), strict=True))


def _linear(x, v, params):
    return params[0] * x + params[1] * v + params[2]


def equation(x, v, params):
    out = _linear(x, v, params)
    keys = x.astype(np.float32).tolist()
    return np.array([0.6 * TABLE.get(k, o) + 0.4 * o for k, o in zip(keys, out, strict=True)], dtype=np.float64)
