TRACE0
R 1f4
status 0;tstop:0;tframes:0
