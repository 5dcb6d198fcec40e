// Placeholder: the page helper replaces this with the explorer.
"use strict";
