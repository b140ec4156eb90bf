// Registers every CPU kernel (side-effect imports), one file per operation family.
import '../index.js';
import './reduce.js';
import './gemm.js';
import './copy.js';
import './indexing.js';
import './sort.js';
import './fft.js';
import './conv.js';
import './pool.js';
import './resample.js';
import './nn.js';
